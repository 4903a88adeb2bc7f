// agentfs ui: opens lazy tree nodes, and reloads a live page when a new checkpoint is committed.
// Served from this origin only (the page's Content-Security-Policy allows no other script).
"use strict";

function loadLazy(details) {
  if (!details.open || details.dataset.loaded) return;
  details.dataset.loaded = "1";
  const target = details.querySelector(".children");
  fetch(details.dataset.src, { credentials: "same-origin" })
    .then((response) => response.text())
    .then((html) => {
      // the fragment is made by the server's templates, every store value escaped there
      target.innerHTML = html;
      watchLazy(target);
    });
}

function watchLazy(root) {
  root.querySelectorAll("details.lazy").forEach((details) => {
    details.addEventListener("toggle", () => loadLazy(details));
  });
}

function watchLive() {
  const live = document.body.dataset.live;
  if (!live) return;
  const source = new EventSource("/events?run=" + encodeURIComponent(live));
  source.onmessage = () => {
    const status = document.getElementById("live-status");
    if (status) status.hidden = false;
    source.close();
    window.location.reload();
  };
}

document.addEventListener("DOMContentLoaded", () => {
  watchLazy(document);
  watchLive();
});
