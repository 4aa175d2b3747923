// The approvals inbox: keyboard triage, selection, and rows kept in place as the inbox changes.
(function () {
  "use strict";

  const root = document.getElementById("approvals");
  if (!root) {
    return;
  }
  const body = document.getElementById("inbox-rows");
  const help = document.getElementById("keys-help");
  const GONE_AFTER_MS = 3000; // a resolved row fades, then goes once no pointer is over the list
  let current = null; // the data-nid of the row the keys act on

  function rows() {
    return Array.from(body.querySelectorAll("tr[data-nid]:not(.gone)"));
  }
  function rowOf(nid) {
    return rows().find((row) => row.dataset.nid === nid) || null;
  }

  function select(row) {
    for (const other of body.querySelectorAll("tr[data-nid]")) {
      other.classList.toggle("current", other === row);
      other.removeAttribute("aria-current");
    }
    current = row ? row.dataset.nid : null;
    if (row) {
      row.setAttribute("aria-current", "true");
      row.scrollIntoView({ block: "nearest" });
    }
  }

  function move(step) {
    const all = rows();
    if (all.length === 0) {
      return;
    }
    const at = all.findIndex((row) => row.dataset.nid === current);
    const next = at === -1 ? 0 : Math.min(Math.max(at + step, 0), all.length - 1);
    select(all[next]);
  }

  function showSelection() {
    const picks = rows().map((row) => row.querySelector("input.pick")).filter(Boolean);
    const ticked = picks.filter((box) => box.checked).length;
    const label = document.getElementById("selected-count");
    if (label) {
      label.textContent = ticked + " selected";
    }
    const all = document.getElementById("select-all");
    if (all) {
      all.checked = picks.length > 0 && ticked === picks.length;
    }
    document.getElementById("inbox-empty").hidden = rows().length > 0;
  }

  // A row resolved elsewhere is greyed and disabled at once, and removed a little later
  // while no pointer is over the list: the rows under a person's hand never shift.
  function markGone(row) {
    row.classList.add("gone");
    row.setAttribute("aria-disabled", "true");
    for (const control of row.querySelectorAll("input, button")) {
      control.disabled = true;
      if (control.classList.contains("pick")) {
        control.checked = false;
      }
    }
    if (row.dataset.nid === current) {
      const next = rows()[0] || null;
      select(next);
    }
  }
  function sweepGone() {
    if (body.matches(":hover")) {
      setTimeout(sweepGone, 1000);
      return;
    }
    for (const row of body.querySelectorAll("tr.gone")) {
      row.remove();
    }
  }

  document.addEventListener("signoff:merge", (event) => {
    const { list, replacement } = event.detail;
    if (list !== body) {
      return;
    }
    const fresh = new Map(
      Array.from(replacement.querySelectorAll("tr[data-nid]")).map((row) => [row.dataset.nid, row]),
    );
    let gone = false;
    for (const row of body.querySelectorAll("tr[data-nid]")) {
      if (!fresh.delete(row.dataset.nid) && !row.classList.contains("gone")) {
        markGone(row);
        gone = true;
      }
    }
    for (const row of fresh.values()) {
      body.appendChild(document.importNode(row, true)); // the newest wait longest: last
    }
    if (gone) {
      setTimeout(sweepGone, GONE_AFTER_MS);
    }
    if (current === null) {
      select(rows()[0] || null);
    }
    showSelection();
  });

  function click(selector) {
    const row = rowOf(current);
    const target = row && row.querySelector(selector);
    if (target) {
      target.click();
    }
  }

  root.addEventListener("change", (event) => {
    if (event.target.id === "select-all") {
      for (const row of rows()) {
        const box = row.querySelector("input.pick");
        if (box) {
          box.checked = event.target.checked;
        }
      }
    }
    showSelection();
  });
  body.addEventListener("click", (event) => {
    const row = event.target.closest("tr[data-nid]:not(.gone)");
    if (row) {
      select(row);
    }
  });

  function ticked() {
    return rows().some((row) => {
      const box = row.querySelector("input.pick");
      return box && box.checked;
    });
  }

  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest("input, textarea, select");
    if (event.key === "Escape" && typing) {
      event.target.blur();
      return;
    }
    if (typing || event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    const open = () => rowOf(current) && window.location.assign(rowOf(current).dataset.detailUrl);
    const actions = {
      j: () => move(1),
      k: () => move(-1),
      x: () => {
        const box = rowOf(current) && rowOf(current).querySelector("input.pick");
        if (box) {
          box.checked = !box.checked;
          showSelection();
        }
      },
      a: () => (ticked() ? document.getElementById("allow-selected").click() : click("button.allow")),
      d: () => {
        const reason = ticked()
          ? document.getElementById("selection-reason")
          : rowOf(current) && rowOf(current).querySelector("input.reason");
        if (reason) {
          reason.focus();
        }
      },
      e: open,
      Enter: open,
      "?": () => (help.open ? help.close() : help.showModal()),
    };
    if (actions[event.key]) {
      event.preventDefault();
      actions[event.key]();
    }
  });

  showSelection();
  select(rows()[0] || null);
})();
