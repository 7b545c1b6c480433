"""Operational endpoints: /healthz."""

from django.db import connection
from django.http import JsonResponse


def healthz(request):
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any database failure means "not healthy"
        return JsonResponse({"ok": False, "db": str(exc)[:200]}, status=503)
    return JsonResponse({"ok": True, "db": "ok"})
