(function () {
  // Tick values in at most about five characters (1.5M, 200k, 0.25).
  function short(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toPrecision(3) + "G";
    if (a >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
    if (a >= 1e3) return +(v / 1e3).toPrecision(3) + "k";
    return String(+v.toPrecision(3));
  }
  document.querySelectorAll("script.zoom-data").forEach(function (s) {
    var d = JSON.parse(s.textContent);
    var el = document.getElementById(s.getAttribute("data-for"));
    var data = uPlot.join(d.series.map(function (x) { return [x.x, x.y]; }));
    var opts = {
      title: d.title,
      width: 900,
      height: 280,
      scales: { x: { time: false } },
      axes: [{ label: d.xlabel }, { label: d.ylabel, size: 60, values: function (u, splits) { return splits.map(short); } }],
      series: [{ label: d.xlabel }].concat(d.series.map(function (x) {
        return { label: x.name, stroke: x.color, width: 1.5, spanGaps: true };
      })),
      cursor: { drag: { x: true, y: false } }
    };
    new uPlot(opts, data, el);
    el.setAttribute("data-points", String(d.series.reduce(function (a, x) { return a + x.x.length; }, 0)));
    el.setAttribute("data-xlabel", d.xlabel);
    el.setAttribute("data-ylabel", d.ylabel);
  });
})();
