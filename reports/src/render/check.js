(function () {
  if (location.hash !== "#check") return;
  var errors = [];
  window.addEventListener("error", function (e) { errors.push("error: " + e.message); });
  var ce = console.error;
  console.error = function () {
    errors.push("console.error: " + Array.prototype.join.call(arguments, " "));
    return ce.apply(console, arguments);
  };
  window.addEventListener("load", function () {
    var v = { errors: errors, requests: [], plots: 0, empty_plots: [], unlabelled_plots: [], overflow: [],
      off_canvas: [], cut_headings: [], empty_sections: [] };
    try {
      v.requests = performance.getEntriesByType("resource").map(function (r) { return r.name; });
      // Local files load without a performance entry: list what would load them.
      document.querySelectorAll("[src], link[href], object[data]").forEach(function (el) {
        v.requests.push(el.tagName + " " + (el.getAttribute("src") || el.getAttribute("href") || el.getAttribute("data")));
      });
      document.querySelectorAll("div.zoom").forEach(function (z) {
        v.plots++;
        var c = z.querySelector("canvas");
        if (!c || c.width === 0 || !(Number(z.getAttribute("data-points")) > 0)) v.empty_plots.push(z.id);
        if (!z.getAttribute("data-xlabel") || !z.getAttribute("data-ylabel")) v.unlabelled_plots.push(z.id);
      });
      var svgs = document.querySelectorAll("svg.plot");
      v.plots += svgs.length;
      svgs.forEach(function (svg, i) {
        var name = (svg.querySelector("title") || {}).textContent || ("plot " + i);
        var marks = 0;
        svg.querySelectorAll("polyline").forEach(function (p) {
          if (p.getAttribute("points").trim().split(/\s+/).length >= 2) marks++;
        });
        marks += svg.querySelectorAll("rect.p, circle, line.pz").length;
        var note = svg.querySelector("text.note");
        if (marks === 0 && !(note && note.textContent.trim())) v.empty_plots.push(name);
        if (svg.classList.contains("map")) {
          var key = svg.querySelector("text.key");
          if (!key || !key.textContent.trim()) v.unlabelled_plots.push(name);
        } else if (!note) {
          var xl = svg.querySelector("text.xl"), yl = svg.querySelector("text.yl");
          if (!xl || !xl.textContent.trim() || !yl || !yl.textContent.trim()) v.unlabelled_plots.push(name);
        }
        var box = svg.getBoundingClientRect();
        // Marks and legend swatches drawn outside the canvas (a legend
        // placed at x = -785 shows nothing but a clipped tail).
        svg.querySelectorAll("rect, circle, line, polyline, path:not(marker path)").forEach(function (m) {
          if (m.closest("marker")) return;
          var b = m.getBoundingClientRect();
          if (b.width === 0 && b.height === 0) return;
          if (b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 || b.bottom > box.bottom + 1) {
            v.off_canvas.push(name + ": " + m.tagName + " at " + [b.left, b.right, b.top, b.bottom].map(Math.round).join(",") +
              " outside " + [box.left, box.right, box.top, box.bottom].map(Math.round).join(","));
          }
        });
        svg.querySelectorAll("text").forEach(function (t) {
          var b = t.getBoundingClientRect();
          if (b.width === 0 && b.height === 0) return;
          if (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5 || b.bottom > box.bottom + 0.5) {
            v.overflow.push(name + ": text '" + t.textContent + "' at " + [b.left, b.right, b.top, b.bottom].map(Math.round).join(",") +
              " outside " + [box.left, box.right, box.top, box.bottom].map(Math.round).join(","));
          }
        });
      });
      document.querySelectorAll("body *:not(svg):not(svg *):not(script):not(style):not(pre)").forEach(function (el) {
        if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
          v.overflow.push(el.tagName + " '" + el.textContent.slice(0, 60) + "' scrolls: " + el.scrollWidth + " > " + el.clientWidth);
        }
        var r = el.getBoundingClientRect(), p = el.parentElement.getBoundingClientRect();
        if (el.children.length === 0 && el.textContent.trim() && r.width > 0 && (r.right > p.right + 1 || r.left < p.left - 1)) {
          v.overflow.push(el.tagName + " '" + el.textContent.slice(0, 60) + "' leaves its box");
        }
      });
      // Headings cut mid-sentence: ending on a word that cannot end one,
      // or a finished sentence followed by a fragment.
      var dangling = /\b(a|an|the|and|or|but|of|to|for|in|on|at|by|from|with|into|as|that|which|is|are|its|their|nor)$/i;
      document.querySelectorAll("h1, h2, h3, h4").forEach(function (hd) {
        var t = hd.textContent.trim();
        var tail = t.split(/[.?!] +(?=[A-Z0-9])/);
        var last = tail[tail.length - 1];
        if (dangling.test(t) || (tail.length > 1 && !/[.?!)]$/.test(last))) v.cut_headings.push(hd.tagName + " '" + t + "'");
      });
      // Sections with nothing under their heading: the next element is a
      // heading of the same or a higher level, or there is none.
      document.querySelectorAll("h2, h3, h4").forEach(function (hd) {
        var level = Number(hd.tagName[1]), el = hd.nextElementSibling, content = false;
        while (el && !content) {
          var m = /^H([1-6])$/.exec(el.tagName);
          if (m && Number(m[1]) <= level) break;
          if (el.id !== "check-verdict" && el.tagName !== "SCRIPT" && (el.textContent.trim() || el.querySelector("svg, canvas, img"))) content = true;
          el = el.nextElementSibling;
        }
        if (!content) v.empty_sections.push(hd.tagName + " '" + hd.textContent.trim() + "'");
      });
      if (document.documentElement.scrollWidth > window.innerWidth + 1) {
        v.overflow.push("page wider than the window: " + document.documentElement.scrollWidth + " > " + window.innerWidth);
      }
    } catch (e) {
      v.errors.push("check failed: " + e);
    }
    var pre = document.createElement("pre");
    pre.id = "check-verdict";
    pre.textContent = JSON.stringify(v);
    document.body.appendChild(pre);
  });
})();
