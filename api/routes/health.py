from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: answers without touching the database (the benchmark's baseline)."""
    return {"status": "ok"}
