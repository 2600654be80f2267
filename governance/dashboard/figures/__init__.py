"""Pure Plotly figure builders: plain data in, a figure dict out; no ORM, no request.

One module per area (costs, overview, jobs, cluster) so that each page's figures live together.
"""

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
