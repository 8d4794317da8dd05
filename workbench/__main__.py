import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported (docs/training.md, Threads)

if __name__ == "__main__":  # not when a spawned sweep worker re-imports this module
    from workbench.cli import main

    main()
