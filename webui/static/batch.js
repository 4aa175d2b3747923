// One batch: refreshes its live part (bar, counts, approvals, results) until the batch ends.
(function () {
  "use strict";

  const root = document.getElementById("batch");
  if (!root || !window.signoffRefreshLists) {
    return;
  }
  const INTERVAL_MS = 1500;
  const ended = new Set(["done", "cancelled"]);

  function status() {
    const node = root.querySelector("[data-batch-status]");
    return node ? node.dataset.batchStatus : "";
  }
  let announced = status();

  document.addEventListener("signoff:swapped", () => {
    const now = status();
    if (now !== announced) {
      announced = now;
      window.signoffAnnounce("Batch " + now);
    }
  });

  const timer = setInterval(() => {
    if (ended.has(status())) {
      clearInterval(timer);
      return;
    }
    window.signoffRefreshLists();
  }, INTERVAL_MS);
})();
