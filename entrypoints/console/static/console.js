// Live rows: an owner's page listens to its event stream and reloads its rows after each write
// touching its owner (the server tells nothing of other owners' writes).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const rows = document.querySelector("[data-live]");
  if (!rows || !window.EventSource) return;
  const stream = new EventSource(rows.dataset.live);
  stream.addEventListener("listening", () => { rows.dataset.listening = "yes"; });
  stream.addEventListener("changed", async () => {
    const answer = await fetch(rows.dataset.fragment, { credentials: "same-origin" });
    if (answer.ok) rows.innerHTML = await answer.text();
  });
});
