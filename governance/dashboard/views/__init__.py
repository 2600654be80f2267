"""Every HTML page: overview, cluster and personal pages (overview), cost pages (costs), findings and jobs (findings).

Pages read the other apps' selectors and hand plain data to the figure builders; no other app imports a page.
"""
