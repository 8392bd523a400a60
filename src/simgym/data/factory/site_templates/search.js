const items = {{items}};
const q = (new URLSearchParams(location.search).get("q") || "").trim().toLowerCase();
const hits = items.filter((item) => q && item[0].toLowerCase().includes(q));
document.getElementById("summary").textContent = hits.length
  ? `${hits.length} {{noun}} for "${q}"`
  : `Nothing matches "${q}".`;
for (const [title, url, note] of hits) {
  const li = document.createElement("li");
  const a = document.createElement("a");
  a.href = url;
  a.textContent = title;
  li.append(a);
  if (note) li.append(` ${note}`);
  document.getElementById("results").append(li);
}
