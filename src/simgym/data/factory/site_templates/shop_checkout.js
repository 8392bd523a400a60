document.getElementById("checkout").addEventListener("submit", (event) => {
  const email = document.getElementById("email");
  const error = document.getElementById("email-error");
  const value = email.value.trim();
  let message = "";
  if (!document.getElementById("name").value.trim()) message = "Please enter your name.";
  else if (!value) message = "Please enter your email address.";
  else if (!{{email_re}}.test(value)) message = "That email address does not look right.";
  if (message) {
    event.preventDefault();
    error.textContent = message;
    error.hidden = false;
    email.setAttribute("aria-invalid", "true");
  }
});
