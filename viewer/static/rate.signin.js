// The sign-in link carries its token in the URL's fragment (#token=...), which the
// browser never sends to a server: read it, drop it from the address bar and history,
// and post it with the form (a plain POST: the token is never in a path or a query).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const hash = window.location.hash.replace(/^#/, "");
  if (!hash) return;
  const token = new URLSearchParams(hash).get("token");
  history.replaceState(null, "", window.location.pathname);
  const form = document.getElementById("signin");
  if (token && form && !document.getElementById("problem")) {
    form.elements.namedItem("token").value = token;
    form.submit();
  }
});
