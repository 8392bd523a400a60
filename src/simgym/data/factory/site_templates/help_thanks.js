const p = new URLSearchParams(location.search);
document.getElementById("summary").textContent =
  `Topic: ${p.get("topic") || "none"}, urgency: ${p.get("urgency") || "low"}.`;
