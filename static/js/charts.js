// Draws every element with data-figure from the JSON figure the server rendered beside it.
document.querySelectorAll("[data-figure]").forEach((el) => {
  const figure = JSON.parse(document.getElementById(el.dataset.figure).textContent);
  const config = { responsive: true, displaylogo: false, toImageButtonOptions: { format: "png", filename: el.id } };
  Plotly.newPlot(el, figure.data, figure.layout, config);
});
