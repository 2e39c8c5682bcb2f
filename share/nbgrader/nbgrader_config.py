"""nbgrader's exchange for a course's hub (share/jupyterhub_config.py points every server here): where the instructor
releases and collects, and where students fetch and submit. The instructor's course folder adds the rest
(python -m dpviz.grading source writes its nbgrader_config.py)."""

import os

c = get_config()  # noqa: F821 (nbgrader defines it)

c.CourseDirectory.course_id = "dpviz"
c.Exchange.root = os.environ.get("DPVIZ_NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
