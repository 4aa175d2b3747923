// What every page shares: the live approvals count (nav badge and tab title), lists that
// refresh in place, relative times with the local time on hover, and confirmations.
(function () {
  "use strict";

  const body = document.body;
  const baseTitle = document.title;
  const REFRESH_MS = 1500; // at most one refresh of a live list per this interval

  // Times: "3 min ago", kept current; the local time on hover.
  const UNITS = [[86400, "d"], [3600, "h"], [60, "min"]];
  function relative(at) {
    const delta = (at - Date.now()) / 1000;
    const seconds = Math.abs(delta);
    if (seconds < 45) {
      return delta <= 0 ? "just now" : "in under a minute";
    }
    for (const [size, name] of UNITS) {
      if (seconds >= size * 0.75) {
        const amount = Math.round(seconds / size);
        return delta > 0 ? "in " + amount + " " + name : amount + " " + name + " ago";
      }
    }
    return "just now";
  }
  function refreshTimes(root) {
    for (const node of root.querySelectorAll("time[data-relative]")) {
      const at = Date.parse(node.getAttribute("datetime"));
      if (!Number.isNaN(at)) {
        node.textContent = relative(at);
        node.title = new Date(at).toLocaleString();
      }
    }
  }
  refreshTimes(document);
  setInterval(() => refreshTimes(document), 30000);

  // Confirmations: a form (or the button that sends it) with data-confirm asks first.
  // Listened to in the capture phase, so a page's own submit handler runs only if confirmed.
  document.addEventListener("submit", (event) => {
    const form = event.target;
    const button = event.submitter;
    const message = (button && button.dataset.confirm) || form.dataset.confirm;
    if (message && !window.confirm(message)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  // Announcements for screen readers: statuses, never streamed tokens.
  const announcer = document.getElementById("announcer");
  window.signoffAnnounce = function (text) {
    if (announcer) {
      announcer.textContent = text;
    }
  };

  if (!body.dataset.eventsUrl) {
    return; // signed out
  }

  // The pending count: the nav badge and the tab title, on every page.
  const navCount = document.getElementById("nav-pending");
  function showCount(value) {
    if (navCount) {
      navCount.textContent = String(value);
    }
    document.title = (value > 0 ? "(" + value + ") " : "") + baseTitle;
  }
  async function refreshCount() {
    try {
      const response = await fetch(body.dataset.countUrl, { credentials: "same-origin" });
      if (response.ok) {
        showCount((await response.json()).pending_count);
      }
    } catch (error) {
      // the next event tries again
    }
  }
  if (navCount && /^\d+$/.test(navCount.textContent)) {
    showCount(Number(navCount.textContent));
  }

  // A chart wider than the screen shows its newest days (the right end) first.
  function showNewest(root) {
    for (const chart of root.querySelectorAll("figure.chart")) {
      chart.scrollLeft = chart.scrollWidth;
    }
  }
  showNewest(document);
  document.addEventListener("signoff:swapped", (event) => showNewest(event.detail));

  // Live lists: an element with data-live-list is replaced by the same element of a fresh
  // copy of the page; pages keep their own state across it (signoff:swapped). One marked
  // data-live-list="merge" is handed to the page's script instead (signoff:merge).
  const lists = Array.from(document.querySelectorAll("[data-live-list]"));
  let pending = null;
  let last = 0;
  let leaving = false;
  window.addEventListener("pagehide", () => { leaving = true; });
  window.addEventListener("beforeunload", () => { leaving = true; });
  async function refreshLists() {
    pending = null;
    last = Date.now();
    if (leaving) {
      return;
    }
    try {
      const response = await fetch(window.location.href, {
        credentials: "same-origin",
        headers: { "X-Signoff-Refresh": "1" },
      });
      if (!response.ok) {
        return;
      }
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const list of lists) {
        const replacement = fresh.getElementById(list.id);
        if (replacement && list.dataset.liveList === "merge") {
          document.dispatchEvent(new CustomEvent("signoff:merge", { detail: { list, replacement } }));
          refreshTimes(list);
        } else if (replacement && replacement.innerHTML !== list.innerHTML) {
          document.dispatchEvent(new CustomEvent("signoff:swapping", { detail: list }));
          list.innerHTML = replacement.innerHTML;
          refreshTimes(list);
          document.dispatchEvent(new CustomEvent("signoff:swapped", { detail: list }));
        }
      }
    } catch (error) {
      // the next event tries again
    }
  }
  function scheduleLists() {
    if (lists.length === 0 || pending !== null) {
      return;
    }
    pending = setTimeout(refreshLists, Math.max(0, last + REFRESH_MS - Date.now()));
  }
  window.signoffRefreshLists = scheduleLists;

  // Pages follow the feed too: each event as `signoff:event` ({type, data}), and each
  // (re)connection as `signoff:feed-open`, after which a page checks what it may have missed.
  function relay(message) {
    let data = null;
    try {
      data = JSON.parse(message.data);
    } catch (error) {
      return;
    }
    document.dispatchEvent(new CustomEvent("signoff:event", { detail: { type: message.type, data } }));
  }

  const source = new EventSource(body.dataset.eventsUrl);
  // The feed is subscribed once its first frame arrives: whatever happens from here is seen.
  source.addEventListener("open", () => {
    body.dataset.live = "open";
    document.dispatchEvent(new CustomEvent("signoff:feed-open"));
  });
  source.addEventListener("error", () => { body.dataset.live = "reconnecting"; });
  source.addEventListener("notification", (message) => {
    refreshCount();
    scheduleLists();
    relay(message);
  });
  source.addEventListener("claim", scheduleLists); // who holds a request: the inbox shows it
  source.addEventListener("status", scheduleLists);
  source.addEventListener("completed", scheduleLists);
  source.addEventListener("failed", scheduleLists);
  source.addEventListener("cancelled", scheduleLists);
})();
