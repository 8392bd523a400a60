document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  const user = document.getElementById("user").value.trim();
  const pass = document.getElementById("pass").value;
  if (user === {{user}} && pass === {{password}}) {
    location.href = "/dashboard";
    return;
  }
  const error = document.getElementById("login-error");
  error.textContent = user ? "Incorrect username or password." : "Enter your username.";
  error.hidden = false;
});
