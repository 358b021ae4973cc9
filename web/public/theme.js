// The theme the user chose last (dark by default), applied before the page paints.
(function () {
  var theme = "dark";
  try {
    var saved = window.localStorage.getItem("sb-theme");
    if (saved === "light" || saved === "dark") theme = saved;
  } catch (_) {
    // Storage can be unavailable (private windows); the default stands.
  }
  document.documentElement.setAttribute("data-theme", theme);
})();
