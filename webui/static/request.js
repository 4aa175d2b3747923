// A request's page: live when it is settled elsewhere, and its keyboard.
(function () {
  "use strict";

  const state = document.getElementById("request-state");
  if (!state) {
    return;
  }
  const nid = state.dataset.nid;

  // Settled elsewhere (the CLI, the API, another operator): the decision forms go and the
  // outcome shows, from a fresh copy of this page (one renderer, the server's).
  async function showSettled() {
    try {
      const response = await fetch(window.location.href, {
        credentials: "same-origin",
        headers: { "X-Signoff-Refresh": "1" },
      });
      if (!response.ok) {
        return;
      }
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      const freshState = fresh.getElementById("request-state");
      if (!freshState || freshState.dataset.status === "pending") {
        return;
      }
      state.replaceWith(document.importNode(freshState, true));
      const badge = fresh.getElementById("request-status");
      const current = document.getElementById("request-status");
      if (badge && current) {
        current.replaceWith(document.importNode(badge, true));
      }
      const outcome = document.querySelector("#request-state #outcome p");
      if (window.signoffAnnounce && outcome) {
        window.signoffAnnounce("Decided elsewhere: " + outcome.textContent.replace(/\s+/g, " ").trim());
      }
    } catch (error) {
      // the next event or reconnection tries again
    }
  }

  function settled() {
    const now = document.getElementById("request-state");
    return now && now.dataset.status !== "pending";
  }

  document.addEventListener("signoff:event", (event) => {
    const { type, data } = event.detail;
    if (type === "notification" && data.notification_id === nid && data.status !== "pending" && !settled()) {
      showSettled();
    }
  });
  // After each (re)connection of the feed: what happened while it was away.
  document.addEventListener("signoff:feed-open", async () => {
    if (settled()) {
      return;
    }
    try {
      const response = await fetch(state.dataset.noteUrl, { credentials: "same-origin" });
      if (response.ok && (await response.json()).status !== "pending") {
        showSettled();
      }
    } catch (error) {
      // the next reconnection tries again
    }
  });

  // Keys: a allow (and next), d deny (type the reason, Enter), e edit the arguments,
  // n the next request, ? help. In a field they type; Esc leaves it.
  const help = document.getElementById("request-keys-help");
  function clickIf(id) {
    const target = document.getElementById(id);
    if (target && !target.disabled) {
      target.click();
    }
  }
  function focusIf(id) {
    const target = document.getElementById(id);
    if (target) {
      target.focus();
    }
  }
  // The first field takes the focus here, once, as the page is parsed. Not `autofocus`: the
  // browser applies that at a later rendering step, and a field left with Esc before then
  // would take the focus back and the next key typed into it.
  const first = document.querySelector("[data-first-field]");
  if (first && document.activeElement === document.body) {
    first.focus();
  }
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest("input, textarea, select");
    if (typing && event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.id === "arguments") {
      event.preventDefault();
      clickIf("allow-next");
      return;
    }
    if (event.key === "Escape" && typing) {
      event.target.blur();
      return;
    }
    if (typing || event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    const next = document.getElementById("next-request");
    const actions = {
      a: () => clickIf("allow-next"),
      d: () => focusIf("reason"),
      e: () => focusIf("arguments"),
      n: () => next && window.location.assign(next.href),
      "?": () => help && (help.open ? help.close() : help.showModal()),
    };
    if (actions[event.key]) {
      event.preventDefault();
      actions[event.key]();
    }
  });
})();
