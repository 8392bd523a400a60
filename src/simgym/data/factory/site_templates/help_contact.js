document.getElementById("contact").addEventListener("submit", (event) => {
  const email = document.getElementById("cemail").value.trim();
  const error = document.getElementById("form-error");
  let message = "";
  if (!{{email_re}}.test(email)) message = "Enter a valid email address.";
  else if (!document.getElementById("msg").value.trim()) message = "Tell us what happened.";
  else if (!document.getElementById("agree").checked) message = "Please agree to be contacted.";
  if (message) {
    event.preventDefault();
    error.textContent = message;
    error.hidden = false;
  }
});
