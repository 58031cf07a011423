// A box that scrolls sideways (a wide table on a phone, templates/base.html) is reached by the
// keyboard: it takes the focus (tabindex 0) and is named by its table's caption or the heading
// above it, so a keyboard user can scroll it and a screen reader says what it holds.
(function () {
  function nameOf(box) {
    var caption = box.querySelector("caption");
    if (caption) return caption.textContent.trim();
    for (var el = box; el && el.tagName !== "MAIN"; el = el.parentElement) {
      for (var before = el.previousElementSibling; before; before = before.previousElementSibling) {
        if (/^H[1-4]$/.test(before.tagName)) return before.textContent.trim();
      }
    }
    return document.title;
  }

  function reachScrolling() {
    document.querySelectorAll("main table, main .scroll, main [style*=overflow]").forEach(function (box) {
      var scrolls = box.scrollWidth > box.clientWidth + 1 && getComputedStyle(box).overflowX !== "visible";
      if (scrolls && !box.hasAttribute("tabindex")) {
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", box.tagName === "TABLE" ? "table" : "region");
        if (!box.hasAttribute("aria-label")) box.setAttribute("aria-label", nameOf(box));
      }
    });
  }

  function ready() {
    reachScrolling();
    window.addEventListener("resize", reachScrolling);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
