// Put first in <head> by test_browser.py: every error and warning of the page, for the probe.
window.__probeErrors = [];
window.addEventListener("error", function (e) { window.__probeErrors.push("error: " + e.message); });
["error", "warn"].forEach(function (level) {
  var original = console[level];
  console[level] = function () {
    window.__probeErrors.push(level + ": " + Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
});
