from simgym.cli import main

main()
