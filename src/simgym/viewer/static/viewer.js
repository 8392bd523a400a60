// simgym view: keyboard navigation and the live list. No framework, no build step.
(function () {
  "use strict";
  var turns = Array.prototype.slice.call(document.querySelectorAll(".turn"));
  var current = -1;
  function focusTurn(i) {
    if (!turns.length) return;
    current = Math.max(0, Math.min(turns.length - 1, i));
    turns.forEach(function (t) { t.classList.remove("current"); });
    var t = turns[current];
    t.classList.add("current");
    t.scrollIntoView({ block: "start" });
    t.focus({ preventScroll: true });
  }
  function go(id) {
    var a = document.getElementById(id) || document.querySelector('a[rel="' + (id.indexOf("next") >= 0 ? "next" : "prev") + '"]');
    if (a) window.location.href = a.href;
  }
  document.addEventListener("keydown", function (ev) {
    var tag = (ev.target && ev.target.tagName) || "";
    if (ev.ctrlKey || ev.metaKey || ev.altKey || /INPUT|SELECT|TEXTAREA/.test(tag)) return;
    if (ev.key === "j") focusTurn(current + 1);
    else if (ev.key === "k") focusTurn(current - 1);
    else if (ev.key === "n") go("next-episode");
    else if (ev.key === "p") go("prev-episode");
    else if (ev.key === "/") { var q = document.getElementById("q"); if (q) { ev.preventDefault(); q.focus(); } }
    else return;
  });
  // A big final state is fetched only when its fold is opened.
  Array.prototype.forEach.call(document.querySelectorAll("details.lazy[data-src]"), function (d) {
    d.addEventListener("toggle", function () {
      if (!d.open || d.dataset.loaded || !window.fetch) return;
      d.dataset.loaded = "1";
      var target = d.querySelector(".lazy-body");
      fetch(d.dataset.src, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      }).then(function (html) {
        target.classList.remove("muted");
        target.innerHTML = html;  // the server's own escaped rendering (json_block)
      }).catch(function (err) {
        target.textContent = "could not load the state: " + err.message;
        delete d.dataset.loaded;
      });
    });
  });
  // Live: while a run appends to the files, the list says how many episodes arrived.
  var body = document.body;
  var fresh = document.getElementById("fresh");
  if (body.dataset.live === "1" && fresh && window.fetch) {
    var seen = parseInt(body.dataset.total || "0", 10);
    setInterval(function () {
      fetch("/api/poll", { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (d) {
        if (d.total > seen) {
          fresh.hidden = false;
          fresh.innerHTML = "";
          var a = document.createElement("a");
          a.href = window.location.href;
          a.textContent = (d.total - seen) + " new episode(s): reload";
          fresh.appendChild(a);
        }
      }).catch(function () {});
    }, 3000);
  }
})();
