// A <select data-autosubmit> submits its form when changed (the language and time-zone
// pickers, the alert history's filter): no onchange attribute, which the CSP refuses.
document.addEventListener("change", function (event) {
  var field = event.target;
  if (field && field.matches && field.matches("select[data-autosubmit]") && field.form) {
    field.form.submit();
  }
});
