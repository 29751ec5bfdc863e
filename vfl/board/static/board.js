// vfl board: refresh the panels of a run that is under way (the live progress, the messages received so far,
// a service's metrics).
// The server draws everything; this only fetches each panel again and stops when the run has ended.
"use strict";

function follow(panel, everyMs) {
  if (!panel || panel.dataset.running !== "yes") {
    return;
  }
  let busy = false;
  const timer = setInterval(async () => {
    if (busy) {
      return;
    }
    busy = true;
    try {
      const response = await fetch(panel.dataset.url, {cache: "no-store"});
      if (response.ok) {
        panel.innerHTML = await response.text();
        panel.dataset.updated = String(Date.now());
        if (response.headers.get("X-Run-Status") !== "running") {
          clearInterval(timer);
          panel.dataset.running = "no";
          if (panel.id === "live") {
            window.location.reload();   // the results and what it learned are complete now
          }
        }
      }
    } catch (error) {
      panel.dataset.error = String(error);
    } finally {
      busy = false;
    }
  }, everyMs);
}

document.addEventListener("DOMContentLoaded", () => {
  follow(document.getElementById("live"), 500);
  follow(document.getElementById("received-panel"), 1000);
  const serving = document.getElementById("serving");
  if (serving) {
    serving.dataset.running = serving.dataset.running || "no";
    follow(serving, 1000);
  }
});
