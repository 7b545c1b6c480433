from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path

from salon import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics_view, name="metrics"),
    path("", include("relay.urls")),
    path("admin/", admin.site.urls),
    re_path(
        r"^{}(?P<path>.+)$".format(settings.STATIC_URL.strip("/") + "/"),
        views.static,
        name="static",
    ),
]
