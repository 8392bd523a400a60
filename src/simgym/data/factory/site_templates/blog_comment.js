document.getElementById("comment-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const who = document.getElementById("cname");
  const text = document.getElementById("ctext");
  const error = document.getElementById("cerror");
  if (!who.value.trim() || !text.value.trim()) {
    error.textContent = "Please write a name and a comment.";
    error.hidden = false;
    return;
  }
  error.hidden = true;
  const li = document.createElement("li");
  li.textContent = `${who.value.trim()}: ${text.value.trim()}`;
  const list = document.getElementById("comments");
  list.append(li);
  document.getElementById("comment-count").textContent = `Comments (${list.children.length})`;
  who.value = "";
  text.value = "";
});
