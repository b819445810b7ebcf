from rerag.cli import main

main()
