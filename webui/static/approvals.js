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

  // What a selection would run, for the confirmations: per tool, and the distinct
  // recipients or paths (each row's first title argument) where the arguments have one.
  function tally(picked) {
    const tools = new Map();
    for (const row of picked) {
      const entry = tools.get(row.dataset.tool) || { count: 0, targets: new Set(), batches: new Set() };
      entry.count += 1;
      if (row.dataset.target) {
        entry.targets.add(row.dataset.target);
      }
      if (row.dataset.batch) {
        entry.batches.add(row.dataset.batch);
      }
      tools.set(row.dataset.tool, entry);
    }
    const lines = [];
    for (const [tool, entry] of tools) {
      let line = entry.count + (tool === "question" ? " question" : " " + tool + " call") + (entry.count === 1 ? "" : "s");
      const targets = Array.from(entry.targets);
      if (targets.length > 0) {
        const shown = targets.slice(0, 3).join("; ");
        line += " (" + targets.length + " distinct: " + shown + (targets.length > 3 ? "; \u2026" : "") + ")";
      }
      if (entry.batches.size > 0) {
        line += " in batch " + Array.from(entry.batches).slice(0, 3).join(", ");
      }
      lines.push(line);
    }
    return lines.join("\n");
  }
  function confirmations(picked) {
    const count = picked.length;
    const what = count + " selected request" + (count === 1 ? "" : "s");
    const allow = document.getElementById("allow-selected");
    const deny = document.getElementById("deny-selected");
    const summary = tally(picked);
    // Nothing ticked: the server says to select first, nothing to confirm.
    if (allow) {
      allow.dataset.confirm = count ? "Allow " + what + "? They run now:\n" + summary : "";
    }
    if (deny) {
      deny.dataset.confirm = count ? "Deny " + what + "?\n" + summary : "";
    }
  }

  function showSelection() {
    const picks = rows().map((row) => row.querySelector("input.pick")).filter(Boolean);
    const ticked = picks.filter((box) => box.checked).length;
    confirmations(picks.filter((box) => box.checked).map((box) => box.closest("tr")));
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

  // Who has a row's request: only its label changes, the row stays where it is.
  function showClaim(row, update) {
    if (row.dataset.claim === update.dataset.claim) {
      return;
    }
    row.dataset.claim = update.dataset.claim;
    const before = row.querySelector(".claim");
    if (before) {
      before.remove();
    }
    const label = update.querySelector(".claim");
    const title = row.querySelector("a.title");
    if (label && title) {
      title.after(document.importNode(label, true));
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
      const update = fresh.get(row.dataset.nid);
      if (update) {
        showClaim(row, update);
        fresh.delete(row.dataset.nid);
      } else if (!row.classList.contains("gone")) {
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
    if (event.key === "Enter" && event.target.closest("a, button, summary")) {
      return; // Enter on a link or button is that control's (the skip link's too)
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

  // Every filter shows on a wide screen; a narrow one keeps them folded until asked.
  const more = document.getElementById("more-filters");
  if (more && window.matchMedia("(min-width: 701px)").matches) {
    more.open = true;
  }

  showSelection();
  select(rows()[0] || null);
})();
