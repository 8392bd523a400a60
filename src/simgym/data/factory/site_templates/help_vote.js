for (const button of document.querySelectorAll(".vote")) {
  button.addEventListener("click", () => {
    document.getElementById("vote-status").textContent = button.textContent === "Yes"
      ? "Thanks for your feedback!"
      : "Sorry to hear that. Contact support and we will help.";
  });
}
