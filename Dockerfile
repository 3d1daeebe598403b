# CoDreamer API + worker on the embedded default. Migrations run on start (`codreamer serve` applies them).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY alembic ./alembic
COPY app ./app
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 codreamer
COPY --from=build /install /usr/local
WORKDIR /home/codreamer
USER codreamer
ENV PYTHONUNBUFFERED=1 TQDM_DISABLE=1 DATABASE_URL=sqlite:////home/codreamer/data/codreamer.sqlite
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/readyz').status != 200)"
CMD ["sh", "-c", "codreamer db upgrade && exec codreamer serve --host 0.0.0.0 --port 8000"]
