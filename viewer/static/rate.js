// Keyboard shortcuts of a rating page (the legend on the page lists them):
// digits pick the score of the current criterion (0: 10 on a 1-10 scale; pairwise:
// 1, 2, t for a tie),
// n = N/A, j / k = next / previous criterion, Enter = submit, s = skip.
// Keys typed into a text box are left alone; Esc leaves the box.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const criteria = Array.from(document.querySelectorAll("fieldset.criterion"));
  const rating = document.getElementById("rating");
  const skip = document.getElementById("skip");
  if (!rating || criteria.length === 0) return;
  let current = 0;

  function show(index) {
    current = Math.max(0, Math.min(criteria.length - 1, index));
    criteria.forEach((c, i) => c.classList.toggle("current", i === current));
    criteria[current].focus({ preventScroll: true });
    criteria[current].scrollIntoView({ block: "nearest" });
  }

  function pick(value) {
    const input = criteria[current].querySelector(`input[type=radio][value="${value}"]`);
    if (!input) return false;
    input.checked = true;
    return true;
  }

  criteria.forEach((c, i) => c.addEventListener("focusin", () => {
    current = i;
    criteria.forEach((d, j) => d.classList.toggle("current", j === i));
  }));

  document.addEventListener("keydown", (event) => {
    const target = event.target;
    const typing = target instanceof HTMLTextAreaElement ||
      (target instanceof HTMLInputElement && target.type !== "radio");
    if (typing || target instanceof HTMLButtonElement || target instanceof HTMLAnchorElement) {
      if (event.key === "Escape") target.blur();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const key = event.key;
    let handled = true;
    if (/^[0-9]$/.test(key)) {
      handled = pick(key) || (key === "0" && pick("10"));
    } else if (key === "n") {
      handled = pick("na");
    } else if (key === "t") {
      handled = pick("tie");
    } else if (key === "j") {
      show(current + 1);
    } else if (key === "k") {
      show(current - 1);
    } else if (key === "Enter") {
      rating.requestSubmit();
    } else if (key === "s" && skip) {
      skip.submit();
    } else {
      handled = false;
    }
    if (handled) event.preventDefault();
  });
  show(0);
});
