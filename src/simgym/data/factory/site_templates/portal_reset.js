document.getElementById("send").addEventListener("click", () => {
  const value = document.getElementById("remail").value.trim();
  document.getElementById("reset-status").textContent = {{email_re}}.test(value)
    ? `If ${value} has an account, a reset link is on its way.`
    : "Enter the email address of your account.";
});
