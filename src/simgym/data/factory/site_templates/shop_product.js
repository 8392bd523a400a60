document.getElementById("add").addEventListener("click", () => {
  const qty = Number(document.getElementById("qty").value);
  const status = document.getElementById("added");
  if (!qty || qty < 1 || qty > 9) {
    status.textContent = "Choose a quantity from 1 to 9.";
    return;
  }
  const choice = document.getElementById("opt").value;
  status.textContent = `Added ${qty} × {{product}} (${choice}) to your cart.`;
});
