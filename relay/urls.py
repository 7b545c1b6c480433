from django.urls import path

from relay import api, views

urlpatterns = [
    path("notify", views.notify, name="notify"),
    path("relay/v1/", api.hello, name="relay-hello"),
    path("relay/v1/join", api.join, name="relay-join"),
    path("relay/v1/status", api.status, name="relay-status"),
    path("relay/v1/revoke", api.revoke, name="relay-revoke"),
    path("relay/v1/rooms/<str:room>", api.room, name="relay-room"),
    path("relay/v1/rooms/<str:room>/entries", api.entries, name="relay-entries"),
]
