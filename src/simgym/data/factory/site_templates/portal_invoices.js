const select = document.getElementById("status");
select.addEventListener("change", () => {
  let shown = 0;
  for (const row of document.querySelectorAll("tr[data-status]")) {
    const keep = select.value === "All" || row.dataset.status === select.value;
    row.hidden = !keep;
    if (keep) shown += 1;
  }
  document.getElementById("shown").textContent = `${shown} invoice(s) shown.`;
});
