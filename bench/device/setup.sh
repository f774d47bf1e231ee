# Sourced by the device scripts: install the carried wheels (Optuna, SQLAlchemy, Alembic) and tuner itself.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --upgrade --no-index --no-deps --target .site .whl/*.whl && export PYTHONPATH=$PWD/.site || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
