from tuner.cli import main

main()
