"""The WSGI application of `make run` (scripts/devstack.py serves it with gunicorn).

``config.wsgi`` plus the static files from the finders, as runserver serves them, so the demo
needs no collectstatic and no proxy. Production serves ``config.wsgi`` and STATIC_ROOT from the
proxy (DEPLOYMENT.md).
"""

from django.contrib.staticfiles.handlers import StaticFilesHandler

from config.wsgi import application as _application

application = StaticFilesHandler(_application)
