// Progressive enhancement only: every page works without it (links and GET forms).
// The scrubber jumps when released; the arrow keys follow the prev/next links.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const scrubber = document.getElementById("scrubber");
  const range = document.getElementById("seq");
  if (scrubber && range) {
    range.addEventListener("change", () => scrubber.submit());
  }
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (target instanceof HTMLInputElement && target.type !== "range") return;
    const link = event.key === "ArrowLeft" ? document.getElementById("prev")
      : event.key === "ArrowRight" ? document.getElementById("next") : null;
    if (link) {
      event.preventDefault();
      window.location.href = link.getAttribute("href");
    }
  });
});
