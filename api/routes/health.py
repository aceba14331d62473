from fastapi import APIRouter

from api.deps import CredentialsFirstRoute

router = APIRouter(route_class=CredentialsFirstRoute, tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: answers without touching the database (the benchmark's baseline)."""
    return {"status": "ok"}
