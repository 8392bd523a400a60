document.getElementById("settings").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = document.getElementById("semail").value.trim();
  const status = document.getElementById("settings-status");
  if (!document.getElementById("display").value.trim()) {
    status.textContent = "The display name cannot be empty.";
  } else if (!{{email_re}}.test(value)) {
    status.textContent = "That email address does not look right.";
  } else {
    status.textContent = "Settings saved.";
  }
});
