FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VAR_DIR=/app/var
WORKDIR /app
COPY pyproject.toml README.md ./
COPY agent agent
COPY governance governance
COPY collectors collectors
# The server depends on the node agent's distribution (agent/): both from this checkout, never from an index.
RUN pip install --no-cache-dir ./agent .
COPY . .
RUN DEBUG=1 STATIC_MANIFEST=1 python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "governance.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--worker-class", "gthread", "--threads", "4"]
