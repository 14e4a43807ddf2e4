! heat.f90: heat.c in Fortran (the same scheme, the same decomposition, the same field,
! bit for bit), through the Fortran module of the melissa-trainer client.
!
!     mpiexec -n 2 ./heat_fortran NX NY STEPS [R]
!
! The grid is u(0:nx+1, j0-1:j1+1): x first, so that the rows of constant y that a rank
! owns, and its halo rows, are contiguous (column-major). The field is declared with its
! Fortran shape [nx, ny]; the module reverses it, so the trainer gets the same array as
! from heat.c: shape (NY, NX), row = y, column = x. Parameters: t_initial, t_left,
! t_right, t_bottom, t_top (kelvin, from the launcher).
program heat
  use, intrinsic :: iso_c_binding, only: c_float, c_double, c_int64_t
  use, intrinsic :: iso_fortran_env, only: error_unit
  use mpi_f08
  use melissa_trainer
  use melissa_trainer_mpi
  implicit none
  character(len=*), parameter :: names(5) = &
    [character(len=9) :: 't_initial', 't_left', 't_right', 't_bottom', 't_top']
  type(mt_client_t) :: client
  integer :: rank, nranks, nx, ny, steps, rows, j0, j1, below, above, step, i, j, k
  real(c_double) :: r, p(5), lap
  real(c_double), allocatable :: u(:, :), next(:, :)
  real(c_float), allocatable :: out(:, :)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  call read_arguments()
  ! This rank's rows j0..j1 (1-based y): ny split as evenly as can be, in rank order.
  rows = ny / nranks + merge(1, 0, rank < mod(ny, nranks))
  j0 = rank * (ny / nranks) + min(rank, mod(ny, nranks)) + 1
  j1 = j0 + rows - 1

  ! No ierr argument: a failure prints the client's message and stops (error stop).
  call mt_create(client)
  call mt_declare_field(client, 'temperature', MT_FLOAT32, [nx, ny])
  call mt_declare_part_count(client, 'temperature', int(rows, c_int64_t) * nx)
  call mt_start_mpi(client, MPI_COMM_WORLD)
  do k = 1, 5
    call mt_parameter(client, trim(names(k)), p(k))
  end do

  allocate (u(0:nx + 1, j0 - 1:j1 + 1), next(0:nx + 1, j0 - 1:j1 + 1), out(nx, j0:j1))
  u = p(1)
  u(0, :) = p(2)
  u(nx + 1, :) = p(3)
  next = u
  below = merge(rank - 1, MPI_PROC_NULL, rank > 0)
  above = merge(rank + 1, MPI_PROC_NULL, rank < nranks - 1)

  do step = 0, steps - 1
    ! Halos: my first row to the rank below, its last row into my row j0-1; and up.
    call MPI_Sendrecv(u(1:nx, j0), nx, MPI_DOUBLE_PRECISION, below, 0, &
                      u(1:nx, j1 + 1), nx, MPI_DOUBLE_PRECISION, above, 0, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    call MPI_Sendrecv(u(1:nx, j1), nx, MPI_DOUBLE_PRECISION, above, 1, &
                      u(1:nx, j0 - 1), nx, MPI_DOUBLE_PRECISION, below, 1, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    if (rank == 0) u(1:nx, j0 - 1) = p(4)
    if (rank == nranks - 1) u(1:nx, j1 + 1) = p(5)
    do j = j0, j1
      do i = 1, nx
        ! The order of heat.c and reference.py, parenthesised (no reassociation).
        lap = (((u(i - 1, j) + u(i + 1, j)) + u(i, j - 1)) + u(i, j + 1)) - 4.0_c_double * u(i, j)
        next(i, j) = u(i, j) + r * lap
      end do
    end do
    call swap(u, next)
    out = real(u(1:nx, j0:j1), c_float)
    call mt_send(client, step, 'temperature', out)
  end do
  call mt_close(client)
  call MPI_Finalize()

contains

  subroutine swap(a, b)
    real(c_double), allocatable, intent(inout) :: a(:, :), b(:, :)
    real(c_double), allocatable :: t(:, :)
    call move_alloc(a, t)
    call move_alloc(b, a)
    call move_alloc(t, b)
  end subroutine

  subroutine read_arguments()
    character(len=64) :: text
    integer :: n, status
    n = command_argument_count()
    if (n < 3 .or. n > 4) call usage('usage: heat_fortran NX NY STEPS [R]')
    call get_command_argument(1, text)
    read (text, *, iostat=status) nx
    if (status /= 0 .or. nx < 1) call usage('NX must be a positive integer')
    call get_command_argument(2, text)
    read (text, *, iostat=status) ny
    if (status /= 0 .or. ny < nranks) call usage('NY must be an integer >= the ranks')
    call get_command_argument(3, text)
    read (text, *, iostat=status) steps
    if (status /= 0 .or. steps < 1) call usage('STEPS must be a positive integer')
    r = 0.2_c_double
    if (n == 4) then
      call get_command_argument(4, text)
      read (text, *, iostat=status) r
      if (status /= 0 .or. .not. (r > 0 .and. r <= 0.25_c_double)) &
        call usage('R must be in (0, 0.25]')
    end if
  end subroutine

  ! Print the message (rank 0) and end every rank with status 2. MPI_Abort may return
  ! (MPICH's hydra, while another rank aborts too: heat.c's die), and the program would go
  ! on with arguments it just refused: the error stop ends this process in any case.
  subroutine usage(message)
    character(len=*), intent(in) :: message
    if (rank == 0) write (error_unit, '(a)') 'heat_fortran: ' // message
    call MPI_Abort(MPI_COMM_WORLD, 2)
    error stop 2
  end subroutine
end program heat
