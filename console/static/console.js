// Wingsmith console: small progressive enhancements. Every page works without this file.
"use strict";

// Copy buttons next to long commands and flag lists (shown only where the clipboard is available).
function wireCopyButtons(root) {
  if (!navigator.clipboard) return;
  root.querySelectorAll("[data-copy]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var block = button.parentElement.querySelector("pre");
      navigator.clipboard.writeText(block.textContent).then(function () {
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = "Copy"; }, 1500);
      });
    });
  });
}

// A form with data-check="<url>" refreshes its #check fragment on every change; a change of the
// field named in data-reload-on reloads the page instead, because the other choices depend on it.
function wireLiveCheck(form) {
  var target = document.getElementById("check");
  var url = form.dataset.check;
  var reloadOn = form.dataset.reloadOn;
  var timer = null;
  var latest = 0;
  function refresh() {
    var ticket = ++latest;
    var query = new URLSearchParams(new FormData(form));
    query.delete("csrf");
    target.setAttribute("aria-busy", "true");
    fetch(url + "?" + query.toString(), {credentials: "same-origin"})
      .then(function (r) { return r.text(); })
      .then(function (html) {
        if (ticket !== latest) return;  // an older answer arriving late must not win
        target.innerHTML = html;
        target.removeAttribute("aria-busy");
      });
  }
  form.addEventListener("change", function (event) {
    if (reloadOn && event.target.name === reloadOn) {
      window.location = form.getAttribute("action") + "?artifact=" + encodeURIComponent(event.target.value);
      return;
    }
    refresh();
  });
  form.addEventListener("input", function (event) {
    if (event.target.type !== "text" && event.target.type !== "number") return;
    clearTimeout(timer);
    timer = setTimeout(refresh, 400);
  });
}

// The pages carry no inline handlers (the Content-Security-Policy forbids them): a form with
// data-confirm asks before it is sent, and a select with data-submit-on-change sends its form.
function wireConfirm(form) {
  form.addEventListener("submit", function (event) {
    if (!window.confirm(form.dataset.confirm)) event.preventDefault();
  });
}

function wireSubmitOnChange(select) {
  select.addEventListener("change", function () { select.form.submit(); });
}

document.addEventListener("DOMContentLoaded", function () {
  wireCopyButtons(document);
  document.querySelectorAll("form[data-check]").forEach(wireLiveCheck);
  document.querySelectorAll("form[data-confirm]").forEach(wireConfirm);
  document.querySelectorAll("select[data-submit-on-change]").forEach(wireSubmitOnChange);
});
