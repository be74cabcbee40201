// dmh search page: plain JavaScript, no external code. Talks to the JSON API of dmh.app.server.app.
// A text search or "more like this" is kept in the page's address (/?q=...&target=...&k=... or
// /?like=ID&...): it can be bookmarked, shared and reloaded, and Back returns to the previous one.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const results = $("results"), status = $("status"), preview = $("query-preview"), notice = $("notice");
  let lastUpload = null;

  function go(params) {  // a new search: a new entry in the browser's history
    const url = "/?" + new URLSearchParams(params).toString();
    if (location.pathname + location.search !== url) history.pushState(null, "", url);
  }

  function fromAddress() {  // the search the address names (on load, Back and Forward)
    const p = new URLSearchParams(location.search);
    const target = p.get("target");
    if (target === "images" || target === "texts") $("target").value = target;
    if (p.get("k")) $("k").value = p.get("k");
    const q = p.get("q"), like = p.get("like");
    $("q").value = q || "";
    if (q && q.trim()) return searchText(q.trim());
    if (like) {
      return call("/api/items/" + encodeURIComponent(like)).then((it) => {
        if (it) similar(it.id, it.caption || it.name);
      });
    }
    results.replaceChildren();
    notice.hidden = true;
    preview.hidden = true;
    setStatus("");
  }

  function options() {
    return "k=" + encodeURIComponent($("k").value || "20") + "&target=" + encodeURIComponent($("target").value);
  }

  function setStatus(text, kind) {
    status.textContent = text;
    status.className = kind === true ? "error" : (kind || "");
  }

  async function call(url, init) {
    const t0 = performance.now();
    let resp;
    try {
      resp = await fetch(url, init);
    } catch (e) {
      setStatus("The server did not answer: " + e, true);
      return null;
    }
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) {
      setStatus((body && body.error) || ("Error " + resp.status), true);
      return null;
    }
    body.client_ms = performance.now() - t0;
    return body;
  }

  function render(answer, label) {
    results.replaceChildren();
    const unknown = answer.unknown_words || [];
    notice.hidden = !(unknown.length && !answer.note);
    notice.textContent = unknown.length ? "Not in this collection\u2019s vocabulary, so left out: " + unknown.join(", ") : "";
    if (answer.note) {  // no word of the query is known: no ranking, and why
      setStatus("No results for " + label + ": " + answer.note.replace(/^no ranking: /, ""), "note");
      document.body.dataset.state = "done";
      return;
    }
    for (const r of answer.results) {
      const fig = document.createElement("figure");
      fig.className = "hit";
      fig.dataset.id = r.id;
      const box = document.createElement("div");
      box.className = "thumb";
      if (r.thumbnail) {
        const img = document.createElement("img");
        img.src = r.thumbnail;
        img.alt = r.caption || r.name;
        img.title = r.name;
        box.appendChild(img);
      } else {
        const none = document.createElement("div");
        none.className = "nophoto";
        none.textContent = "caption without a photo";
        box.appendChild(none);
      }
      fig.appendChild(box);
      const cap = document.createElement("figcaption");
      const text = document.createElement("div");
      text.className = r.caption ? "caption" : "caption none";
      text.textContent = r.caption || "(no caption)";
      const meta = document.createElement("div");
      meta.className = "meta";
      const dist = document.createElement("span");
      dist.className = "distance";
      dist.textContent = "distance " + r.distance;
      const more = document.createElement("button");
      more.className = "more";
      more.type = "button";
      more.textContent = "More like this";
      more.addEventListener("click", () => {
        go({ like: r.id, target: $("target").value, k: $("k").value || "20" });
        similar(r.id, r.caption || r.name);
      });
      meta.append(dist, more);
      cap.append(text, meta);
      fig.appendChild(cap);
      results.appendChild(fig);
    }
    const n = answer.results.length;
    setStatus(n + " result" + (n === 1 ? "" : "s") + " for " + label + " (" + answer.took_ms.toFixed(1) + " ms on the server)");
    document.body.dataset.state = "done";
  }

  async function searchText(q) {
    document.body.dataset.state = "busy";
    preview.hidden = true;
    const answer = await call("/api/search?q=" + encodeURIComponent(q) + "&" + options());
    if (answer) render(answer, "\u201c" + q + "\u201d");
    else document.body.dataset.state = "error";
  }

  async function searchImage(file) {
    if (!file) return;
    if (!file.type.startsWith("image/")) { setStatus("That file is not an image.", true); return; }
    lastUpload = file;
    go({});  // an upload cannot live in the address: Back returns to the search before it
    document.body.dataset.state = "busy";
    preview.replaceChildren();
    const img = document.createElement("img");
    img.src = URL.createObjectURL(file);
    preview.append(img, document.createTextNode("photos like " + file.name));
    preview.hidden = false;
    const answer = await call("/api/search/image?" + options(),
      { method: "POST", headers: { "Content-Type": file.type }, body: file });
    if (answer) render(answer, "the photo " + file.name);
    else document.body.dataset.state = "error";
  }

  async function similar(id, label) {
    document.body.dataset.state = "busy";
    preview.hidden = true;
    const answer = await call("/api/similar/" + encodeURIComponent(id) + "?" + options());
    if (answer) render(answer, "items like \u201c" + label + "\u201d");
    else document.body.dataset.state = "error";
  }

  $("text-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = $("q").value.trim();
    if (!q) return;
    go({ q: q, target: $("target").value, k: $("k").value || "20" });
    searchText(q);
  });
  window.addEventListener("popstate", fromAddress);
  $("file").addEventListener("change", (ev) => searchImage(ev.target.files[0]));
  const drop = $("drop");
  ["dragenter", "dragover"].forEach((t) => drop.addEventListener(t, (ev) => { ev.preventDefault(); drop.classList.add("over"); }));
  ["dragleave", "drop"].forEach((t) => drop.addEventListener(t, (ev) => { ev.preventDefault(); drop.classList.remove("over"); }));
  drop.addEventListener("drop", (ev) => searchImage(ev.dataTransfer.files[0]));
  drop.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") $("file").click(); });

  call("/api/info").then((info) => {
    if (!info) return;
    const c = info.collection;
    $("about").textContent = c.items + " items: " + c.images + " photos, " + c.texts + " captions \u00b7 " +
      c.n_bits + "-bit " + c.method.toUpperCase() + " codes";
    $("k").max = info.limits.max_k;
    $("q").maxLength = info.limits.max_query_chars;
    document.body.dataset.ready = "1";
    fromAddress();
  });
})();
