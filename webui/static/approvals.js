// The approvals inbox: keeps the pending count live from the global event feed.
(function () {
  "use strict";

  const root = document.getElementById("approvals");
  if (!root) {
    return;
  }
  const count = document.getElementById("pending-count");
  const navCount = document.getElementById("nav-pending");
  const notice = document.getElementById("new-notice");

  async function refresh() {
    const response = await fetch(root.dataset.countUrl, { credentials: "same-origin" });
    if (!response.ok) {
      return;
    }
    const body = await response.json();
    const value = String(body.pending_count);
    if (count.textContent !== value) {
      count.textContent = value;
      notice.hidden = false;
    }
    if (navCount) {
      navCount.textContent = String(body.pending_count);
    }
  }

  const source = new EventSource(root.dataset.eventsUrl);
  source.addEventListener("notification", () => { refresh(); });
})();
