// One batch: refreshes the progress, counts and approvals from the API until the batch ends.
(function () {
  "use strict";

  const root = document.getElementById("batch");
  if (!root) {
    return;
  }
  const INTERVAL_MS = 1000;
  const ended = new Set(["done", "cancelled"]);
  const bar = root.querySelector("progress.batch-progress");
  const status = document.getElementById("batch-status");

  function setText(id, value) {
    const node = document.getElementById(id);
    if (node) {
      node.textContent = String(value);
    }
  }

  function render(batch) {
    bar.max = Math.max(batch.total, 1);
    bar.value = batch.finished;
    bar.textContent = batch.finished + " of " + batch.total;
    root.querySelector(".progress-text .finished").textContent = String(batch.finished);
    root.querySelector(".progress-text .total").textContent = String(batch.total);
    for (const cell of root.querySelectorAll("#batch-counts td[data-state]")) {
      cell.textContent = String(batch.counts[cell.dataset.state] || 0);
    }
    status.textContent = batch.status;
    status.className = "badge status-" + batch.status;
    root.dataset.status = batch.status;
    setText("batch-approvals", batch.pending_approvals);
    setText("batch-tokens", batch.usage.total_token_count);
  }

  async function poll() {
    try {
      const response = await fetch(root.dataset.batchUrl, { credentials: "same-origin" });
      if (response.ok) {
        render(await response.json());
      }
    } catch (error) {
      // the next poll tries again
    }
    if (ended.has(root.dataset.status)) {
      document.getElementById("batch-notice").hidden = false;
      const cancel = document.getElementById("cancel-form");
      if (cancel) {
        cancel.hidden = true; // nothing left to cancel
      }
      return;
    }
    setTimeout(poll, INTERVAL_MS);
  }

  if (!ended.has(root.dataset.status)) {
    setTimeout(poll, INTERVAL_MS);
  }
})();
