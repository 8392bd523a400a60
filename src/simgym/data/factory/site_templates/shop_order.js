const params = new URLSearchParams(location.search);
const email = params.get("email");
const shipping = params.get("shipping") || "standard";
if (email) {
  document.getElementById("receipt").textContent =
    `A receipt was sent to ${email} (${shipping} shipping).`;
}
