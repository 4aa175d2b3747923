// The live view of one conversation: follows its events over SSE and renders them.
// Everything from the model is inserted with textContent, never as HTML.
(function () {
  "use strict";

  const root = document.getElementById("conversation");
  if (!root) {
    return;
  }
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const live = document.getElementById("live");
  const streamState = document.getElementById("stream-state");
  const notice = document.getElementById("notice");
  const seen = new Set(
    Array.from(document.querySelectorAll("#history [data-step-index]"), (el) => el.dataset.stepIndex)
  );
  const partials = new Map(); // step index -> element being streamed

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) {
      node.className = className;
    }
    if (text !== undefined && text !== null) {
      node.textContent = text;
    }
    return node;
  }

  function thinkingBlock(text, open) {
    const details = el("details", "thinking");
    details.open = open;
    details.appendChild(el("summary", null, "Thinking"));
    details.appendChild(el("div", "text", text));
    return details;
  }

  function toolCalls(calls) {
    const list = el("ul", "tool-calls");
    for (const call of calls) {
      const item = el("li");
      item.appendChild(el("span", "label", "Tool call "));
      item.appendChild(el("code", null, call.name));
      item.appendChild(el("pre", null, JSON.stringify(call.args, null, 2)));
      list.appendChild(item);
    }
    return list;
  }

  const titles = { user_input: "Prompt", text_response: "Model", tool_call: "Model",
    tool_result: "Tool result", compaction: "Compacted" };

  // The timeline: when each step was recorded and how long after the one before (as the
  // server renders it, webui/timefmt.py: gap).
  function gap(seconds) {
    const s = Math.max(seconds, 0);
    if (s < 10) {
      return s.toFixed(1) + " s";
    }
    if (s < 90) {
      return Math.round(s) + " s";
    }
    if (s < 5400) {
      return Math.round(s / 60) + " min";
    }
    return s < 129600 ? Math.round(s / 3600) + " h" : Math.round(s / 86400) + " d";
  }

  function stepTime(step) {
    const line = el("p", "step-time");
    const iso = new Date(step.at * 1000).toISOString().slice(0, 19);
    const time = el("time", null, "just now");
    time.dateTime = iso + "+00:00";
    time.title = iso.replace("T", " ") + " UTC";
    time.dataset.relative = "";
    line.appendChild(time);
    const before = Array.from(document.querySelectorAll("article.step[data-at]")).pop();
    if (before) {
      line.appendChild(document.createTextNode(" "));
      const since = el("span", "muted step-gap", "+" + gap(step.at - Number(before.dataset.at)));
      since.title = "since the step before";
      line.appendChild(since);
    }
    return line;
  }

  function renderStep(step) {
    const article = el("article", "step step-" + step.type + (step.error ? " step-error" : ""));
    article.dataset.stepIndex = String(step.step_index);
    if (step.at) {
      article.appendChild(stepTime(step));
      article.dataset.at = String(step.at);
    }
    if (step.type === "finish") {
      const usage = step.usage_metadata ? " · " + step.usage_metadata.total_token_count + " tokens" : "";
      article.appendChild(el("p", "finish", "Turn finished" + usage));
      return article;
    }
    article.appendChild(el("h3", "who", titles[step.type] || step.type.replace(/_/g, " ")));
    if (step.thinking) {
      article.appendChild(thinkingBlock(step.thinking, false));
    }
    const body = step.content || step.error;
    if (body) {
      article.appendChild(el(step.type === "tool_result" ? "pre" : "div", "text", body));
    }
    if (step.tool_calls && step.tool_calls.length && step.type !== "tool_result") {
      article.appendChild(toolCalls(step.tool_calls));
    }
    return article;
  }

  function streamingStep(index) {
    let article = partials.get(index);
    if (!article) {
      article = el("article", "step step-text_response streaming");
      article.dataset.stepIndex = index;
      article.appendChild(el("h3", "who", "Model"));
      const thinking = thinkingBlock("", true);
      thinking.hidden = true;
      article.appendChild(thinking);
      article.appendChild(el("div", "text live-text"));
      live.appendChild(article);
      partials.set(index, article);
    }
    return article;
  }

  function onStep(event) {
    const step = event.step;
    const empty = document.getElementById("empty-history");
    if (empty) {
      empty.remove();
    }
    const index = String(step.step_index);
    if (seen.has(index)) {
      return; // already rendered with the page, or finished
    }
    if (step.status === "active") {
      const article = streamingStep(index);
      if (step.thinking_delta) {
        const details = article.querySelector("details.thinking");
        details.hidden = false;
        details.querySelector(".text").textContent += step.thinking_delta;
      }
      if (step.content_delta) {
        article.querySelector(".live-text").textContent += step.content_delta;
      }
      return;
    }
    seen.add(index);
    refreshCounts(); // a finished step has its usage written: the header's counts follow
    const finished = renderStep(step);
    const partial = partials.get(index);
    if (partial) {
      partial.replaceWith(finished); // the authoritative step replaces the deltas
      partials.delete(index);
    } else {
      live.appendChild(finished);
    }
  }

  // The header's turns, tokens and cost: refreshed in place (static/app.js, at most every 1.5 s).
  function refreshCounts() {
    if (window.signoffRefreshLists) {
      window.signoffRefreshLists();
    }
  }

  function setStatus(status) {
    const badge = el("span", "badge status-" + status, status.replace(/_/g, " "));
    const holder = document.getElementById("status");
    holder.replaceChildren(badge);
  }

  function turnEnded(kind, text) {
    for (const article of partials.values()) {
      article.classList.remove("streaming");
    }
    partials.clear();
    live.appendChild(el("p", "turn-end " + kind, text));
    announce(text);
  }

  // Screen readers hear statuses and turn ends, never the streamed tokens.
  function announce(text) {
    if (window.signoffAnnounce) {
      window.signoffAnnounce(text);
    }
  }

  const handlers = {
    turn_started: () => {
      live.appendChild(el("hr", "turn-start"));
      refreshCounts();
    },
    step: onStep,
    status: (event) => {
      setStatus(event.status);
      announce("Conversation " + event.status.replace(/_/g, " "));
    },
    completed: () => turnEnded("completed", "Turn completed."),
    failed: (event) => turnEnded("failed", "Turn failed: " + event.error),
    cancelled: (event) => turnEnded("cancelled", "Turn cancelled: " + event.reason),
    notification: (event) => {
      if (event.status && event.status !== "pending") {
        return; // a resolution: the status event that follows says what happens next
      }
      const text = "Waiting for an operator: " + (event.title || event.notification_kind);
      live.appendChild(el("p", "turn-end waiting", text));
      announce(text);
    },
  };

  function connect() {
    let url = root.dataset.eventsUrl;
    if (root.dataset.lastEventId) {
      url += "?last_event_id=" + encodeURIComponent(root.dataset.lastEventId);
    }
    const source = new EventSource(url);
    source.onopen = () => { streamState.textContent = "Live."; streamState.dataset.state = "open"; };
    source.onerror = () => { streamState.textContent = "Reconnecting…"; streamState.dataset.state = "reconnecting"; };
    for (const [kind, handle] of Object.entries(handlers)) {
      source.addEventListener(kind, (message) => handle(JSON.parse(message.data)));
    }
  }

  async function post(url, body) {
    const headers = { "X-CSRF-Token": csrf };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
    }
    const response = await fetch(url, {
      method: "POST", headers, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) {
      const problem = await response.json().catch(() => ({ error: { message: response.statusText } }));
      throw new Error(problem.error.message);
    }
    return response.json();
  }

  const abortForm = document.getElementById("abort-form");
  abortForm.addEventListener("submit", async (submit) => {
    submit.preventDefault();
    try {
      await post(root.dataset.abortUrl);
      notice.textContent = "Abort requested.";
    } catch (error) {
      notice.textContent = "Abort failed: " + error.message;
    }
  });

  const promptForm = document.getElementById("prompt-form");
  if (promptForm) {
    promptForm.addEventListener("submit", async (submit) => {
      submit.preventDefault();
      const textarea = promptForm.querySelector("textarea");
      const errorLine = document.getElementById("prompt-error");
      errorLine.textContent = "";
      try {
        await post(root.dataset.promptUrl, { text: textarea.value });
        textarea.value = "";
      } catch (error) {
        errorLine.textContent = error.message;
      }
    });
  }

  connect();
})();
