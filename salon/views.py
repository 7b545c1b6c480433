"""Operational endpoints: /healthz, /metrics, and the static files of the admin."""

from __future__ import annotations

from django.contrib.staticfiles.views import serve
from django.db import connection
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from salon import metrics


@require_safe
def healthz(request):
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any database failure means "not healthy"
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        return JsonResponse({"ok": False, "db": detail}, status=503)
    return JsonResponse({"ok": True, "db": "ok"})


@require_safe
def metrics_view(request):
    return HttpResponse(metrics.render(), content_type="text/plain; version=0.0.4; charset=utf-8")


def static(request, path):
    """The admin's CSS and JS, straight from the app directories (daphne serves no static
    files, and `salon serve` needs no collectstatic). Read-only, finders only."""
    if ".." in path.replace("\\", "/").split("/"):
        raise Http404("no such static file")
    response = serve(request, path, insecure=True)
    response["Cache-Control"] = "public, max-age=3600"
    return response
